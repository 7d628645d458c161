"""Coming from Pawwake 4.x: adopting its database in place, the dry run and the rollback."""
