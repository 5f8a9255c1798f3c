"""Driver failures the service turns into 'store unavailable' (503) at its edge."""

from __future__ import annotations

import sqlalchemy as sa

DATABASE_ERRORS: tuple[type[Exception], ...] = (
    sa.exc.OperationalError,
    sa.exc.InterfaceError,
    sa.exc.DBAPIError,
)


def is_unavailable(error: Exception) -> bool:
    """Lost or refused connections and timeouts, not constraint violations or SQL bugs."""
    if isinstance(error, sa.exc.OperationalError | sa.exc.InterfaceError):
        return True
    if isinstance(error, sa.exc.DBAPIError):
        if error.connection_invalidated or isinstance(error.orig, OSError | TimeoutError):
            return True
        if error.statement is None:  # raised while connecting, before any SQL was sent
            return True
        return _sqlstate(error.orig).startswith(_UNAVAILABLE_SQLSTATE_CLASSES)
    return False


# Connection exception, insufficient resources, operator intervention (shutdown, cannot connect now).
_UNAVAILABLE_SQLSTATE_CLASSES = ("08", "53", "57P")


def _sqlstate(original: BaseException | None) -> str:
    code = getattr(original, "pgcode", None) or getattr(original, "sqlstate", None)
    return code if isinstance(code, str) else ""
