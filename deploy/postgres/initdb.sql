-- Run once, by the postgres image, when its data volume is first initialised.
-- pipeline and driver each keep their tables and their own Alembic history in a database of their own.
-- A service added later that owns tables needs its database created by hand on an existing volume
-- (docs/deployment.md, "Upgrading").
CREATE DATABASE larkbot_pipeline OWNER larkbot;
CREATE DATABASE larkbot_driver OWNER larkbot;
