"""The message-history pipeline on Spark: archive, report, redrive.

Reads the store only through the export view `message_export_v1` (and writes only its
own ledgers, plus the deletes and re-sends its jobs exist for); imports nothing of the
gateway's packages.
"""
