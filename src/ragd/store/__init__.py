from .postgres import Store

__all__ = ["Store"]
