"""The delivery ledger in the shared SQLite file (component ``deliveries``).

One ``BEGIN IMMEDIATE`` transaction per report, so two processes reporting the same delivery
record it once. Schema: ``docs/store.md``.
"""

from __future__ import annotations

import datetime as dt

import attrs

from promptweave.store.deliveries import DELIVERY_LEDGER_MAX, DeliveryState, settle_delivery
from promptweave.store.sqlite import Migration, SQLiteDatabase

__all__ = ["DELIVERY_MIGRATIONS", "SQLiteDeliveryLedger"]

DELIVERY_MIGRATIONS = (
    Migration(
        component="deliveries",
        version=1,
        sql="""
        CREATE TABLE deliveries (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            bot_id TEXT NOT NULL,
            group_id TEXT NOT NULL,
            answering TEXT,
            message TEXT,
            at REAL NOT NULL
        );
        CREATE UNIQUE INDEX deliveries_message
            ON deliveries (bot_id, group_id, message) WHERE message IS NOT NULL;
        CREATE INDEX deliveries_answering
            ON deliveries (bot_id, group_id, answering) WHERE answering IS NOT NULL;
        CREATE INDEX deliveries_scope ON deliveries (bot_id, group_id, seq);
        """,
    ),
)


@attrs.define
class SQLiteDeliveryLedger:
    """:class:`promptweave.store.deliveries.DeliveryLedger` in table ``deliveries``.

    The table is created on first use, so building a runtime never touches the file.
    """

    _database: SQLiteDatabase = attrs.field(alias="database")
    _migrated: bool = attrs.field(default=False, init=False)

    @property
    def database(self) -> SQLiteDatabase:
        if not self._migrated:
            self._database.migrate(DELIVERY_MIGRATIONS)
            self._migrated = True
        return self._database

    def record_delivery(
        self,
        bot_id: str,
        group_id: str,
        *,
        answering: str | None,
        message: str | None,
        now: dt.datetime,
    ) -> DeliveryState:
        scope = (bot_id, group_id)
        with self.database.transaction() as connection:
            # The (bot, group) keeps DELIVERY_LEDGER_MAX rows at most, read by the scope index.
            rows = connection.execute(
                "SELECT seq, answering, message FROM deliveries"
                " WHERE bot_id = ? AND group_id = ? ORDER BY seq",
                scope,
            ).fetchall()
            known = [(row["answering"], row["message"]) for row in rows]
            state, noted = settle_delivery(known, answering=answering, message=message)
            if noted is not None:
                connection.execute(
                    "UPDATE deliveries SET message = ? WHERE seq = ?", (message, rows[noted]["seq"])
                )
            elif state is DeliveryState.NEW:
                connection.execute(
                    "INSERT INTO deliveries (bot_id, group_id, answering, message, at)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (*scope, answering, message, now.timestamp()),
                )
                connection.execute(
                    "DELETE FROM deliveries WHERE seq IN (SELECT seq FROM deliveries"
                    " WHERE bot_id = ? AND group_id = ? ORDER BY seq DESC LIMIT -1 OFFSET ?)",
                    (*scope, DELIVERY_LEDGER_MAX),
                )
        return state
