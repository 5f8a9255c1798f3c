"""The gateway as an SRMP sender: stream receipts and outgoing queues, over HTTP."""
