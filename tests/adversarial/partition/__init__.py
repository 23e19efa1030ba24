"""Network partitions: worker processes in network namespaces of their own, one of them cut
off from the database mid-turn and reconnected (PRODUCT §A6 fencing, §A8 takeover)."""
