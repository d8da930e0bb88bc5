"""Pure manners: the share of voice over the rendered context, the quiet-hours window, the talk levels'
guidance and the gate before the probe."""
