"""Delta Lake: the transaction log protocol (https://github.com/delta-io/delta/blob/master/PROTOCOL.md).

Protocols up to reader version 3 and writer version 7, with the table features :mod:`lakeops.delta.features` lists
(each with the operations that honour it); the table properties lakeops reads are named in
:mod:`lakeops.delta.properties`."""
