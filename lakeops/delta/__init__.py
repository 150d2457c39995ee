"""Delta Lake: the transaction log protocol (https://github.com/delta-io/delta/blob/master/PROTOCOL.md)."""
