"""Lesson apps: thin layers of controls -> distlab model -> plots. One module per lesson.

    from distlab.widgets.memory_wall import MemoryWallApp
    MemoryWallApp()
"""
