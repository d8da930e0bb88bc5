"""Pure shell: task states, argument checks and the maintainer gate."""
