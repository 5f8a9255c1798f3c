"""The queue manager: MSMQ's queue and message rules, independent of transport and storage."""
