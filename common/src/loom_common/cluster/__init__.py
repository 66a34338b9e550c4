"""Controller clusters: shard assignment (pure) and ZooKeeper membership (Kazoo)."""
