"""Helpers for bench/compare: tern against nginx and the floor server, side by side."""
