"""The tools the model may call."""
