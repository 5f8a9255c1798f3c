"""An import-linter contract type: the source packages may import only the standard library
and the packages listed (an allow-list, where `forbidden` is a deny-list that a new dependency
slips past). Registered in pyproject.toml under [tool.importlinter]; a broken contract lists
each illegal import with its line."""

from __future__ import annotations

import sys
from typing import Any

from grimp import ImportGraph
from importlinter.application import output
from importlinter.domain import fields
from importlinter.domain.contract import Contract, ContractCheck


class AllowListContract(Contract):
    """Configuration: `source_modules` (packages), `allowed_modules` (packages their modules may
    import besides the standard library: sys.stdlib_module_names)."""

    type_name = "allow_list"

    source_modules = fields.ListField(subfield=fields.ModuleField())
    allowed_modules = fields.ListField(subfield=fields.ModuleField())

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        allowed = [module.name for module in self.allowed_modules]  # type: ignore[attr-defined]
        illegal: list[dict[str, Any]] = []
        for source in self.source_modules:  # type: ignore[attr-defined]
            importers = {source.name} | graph.find_descendants(source.name)
            for importer in sorted(importers):
                for imported in sorted(graph.find_modules_directly_imported_by(importer)):
                    if imported.partition(".")[0] in sys.stdlib_module_names or any(
                        imported == name or imported.startswith(f"{name}.") for name in allowed
                    ):
                        continue
                    details = graph.get_import_details(importer=importer, imported=imported)
                    lines = sorted({detail["line_number"] for detail in details})
                    illegal.append({"importer": importer, "imported": imported, "lines": lines})
        return ContractCheck(kept=not illegal, metadata={"illegal": illegal})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for link in check.metadata["illegal"]:
            lines = ", ".join(str(line) for line in link["lines"])
            output.print_error(f"- {link['importer']} -> {link['imported']} (l.{lines})", bold=False)
        output.new_line()
