"""Lesson apps: thin layers of controls -> distlab model -> plots. One module per lesson; every app is a
widgets.common.LessonApp (compute -> render -> summary, with the one error display).

    from distlab.widgets.memory_wall import MemoryWallApp
    MemoryWallApp()
"""

__all__ = []
