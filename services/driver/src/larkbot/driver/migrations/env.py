from larkbot.driver.tables import metadata
from larkbot.runtime.migrations import run_env

run_env(metadata)
