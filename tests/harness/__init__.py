"""Test harness for cross-service tests: real services as processes on a real bus."""
