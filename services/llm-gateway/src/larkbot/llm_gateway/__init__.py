"""LarkBot package."""
