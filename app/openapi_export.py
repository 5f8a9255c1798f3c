"""Write the OpenAPI document of the app: `python -m app.openapi_export openapi/openapi.json`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from app.main import create_app
from app.settings import Settings


def openapi_document() -> dict[str, Any]:
    # The document does not depend on the database; no connection is made here.
    return create_app(Settings(database_url="sqlite+aiosqlite:///:memory:")).openapi()


def render() -> str:
    return json.dumps(openapi_document(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
    target = Path(argv[1] if len(argv) > 1 else "openapi/openapi.json")
    target.write_text(render(), encoding="utf-8")
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
