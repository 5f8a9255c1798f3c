"""Driver failures the service turns into 'store unavailable' (503) at its edge."""

from __future__ import annotations

import sqlalchemy as sa

DATABASE_ERRORS: tuple[type[Exception], ...] = (sa.exc.OperationalError, sa.exc.InterfaceError)
