"""Widgets of `ragen watch`, one per module."""
