"""Pure matplotlib drawing: data in, Figure/Axes out. Nothing here computes physics."""

__all__ = []
