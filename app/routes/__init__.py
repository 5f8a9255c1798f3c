"""One module per resource; each route decodes, calls the queue manager once, encodes."""
