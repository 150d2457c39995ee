"""Delta Lake: the transaction log protocol (``specs/delta-protocol.txt``)."""
