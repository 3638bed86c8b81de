"""distlab instructor-pack: the syllabus, misconceptions, cheat sheet, glossary, bibliography, guide and slides."""

from __future__ import annotations

__all__ = ["NAME", "HELP", "add_arguments", "run"]

NAME = "instructor-pack"
HELP = (
    "build the instructor pack (syllabus, misconceptions, cheat sheet, glossary, bibliography, course guide, "
    "one reveal.js slideshow per lesson) from the repository"
)


def add_arguments(parser) -> None:
    parser.add_argument("--out", default="build/instructor", help="output folder (default build/instructor)")
    parser.add_argument("--repo", default=".", help="the distlab repository to read (default: the current folder)")
    parser.add_argument("--hide-code", action="store_true", help="slides without code cells (a lecture view)")
    parser.add_argument("--no-slides", action="store_true", help="only the pages, no slides (faster)")


def run(args) -> int:
    import importlib.util

    from .. import instructor_pack
    from ..errors import ConfigurationError

    missing = [name for name in ("nbformat", "nbconvert") if importlib.util.find_spec(name) is None]
    if missing:
        raise ConfigurationError(
            f"the instructor pack reads and converts notebooks with {' and '.join(missing)}, which this environment "
            "lacks: pip install 'distlab[instructor]' (or '.[instructor]' in a checkout)"
        )

    written = instructor_pack.build(args.out, repo=args.repo, hide_code=args.hide_code, slides=not args.no_slides)
    slides = sum(1 for p in written if p.name.endswith(".slides.html"))
    print(f"wrote {len(written)} files ({slides} slideshows) under {args.out}/; open {args.out}/index.html")
    return 0
