"""The one pint registry of distlab, input parsing and output formatting.

Conventions (the README's Units paragraph says the same): GB = 10**9 bytes, GiB = 2**30
bytes; a lowercase b is a bit ("400 Gb/s" = 50 GB/s); link bandwidths are per direction.
Inside, hot paths work on plain floats in base units (byte, second, flop); results get units
at the boundary.

pint's default registry treats bytes as dimensionless and reads "Gb" as gilbert, so
distlab builds a small registry of its own with information and computation as
dimensions. The registry is built on first use (pint's import and the registry take 0.15-0.3 s, and code that only
formats numbers, such as Lesson 7's app, never needs them; issue 32): `ureg` and `Q_` read as before.
"""

from __future__ import annotations

import functools
import math
import numbers
import sys
import textwrap
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pint

from .errors import ConfigurationError, UnitError

__all__ = [
    "ureg",  # noqa: F822 - built on first use (module __getattr__)
    "Q_",
    "BYTES",
    "BYTES_PER_SECOND",
    "SECONDS",
    "FLOP",
    "FLOP_PER_SECOND",
    "MAX_QUANTITY_CHARS",
    "parse_quantity",
    "require_finite",
    "to_base",
    "positive",
    "non_negative",
    "positive_int",
    "quantity",
    "gigabytes_property",
    "format_bytes",
    "format_count",
    "format_gibibytes",
    "format_rate",
    "format_seconds",
    "second_unit",
    "format_quantity",
    "TEXT_WIDTH",
    "WARNING_WIDTH",
    "wrap_text",
]

#: The widest line a library sentence prints. JupyterLab wraps a longer output line (at about 117 characters in a
#: 1400 px window with the file browser open) inside words and numbers; tests/lessons/test_output_width.py allows
#: 110, and 100 leaves room for the label a lesson prints in front of a sentence.
TEXT_WIDTH = 100

#: The widest line of a warning, which lessons and apps print after a label ("warning (imbalance): ", 21 characters).
WARNING_WIDTH = 84


def wrap_text(text: str, width: int = TEXT_WIDTH, indent: str = "    ") -> str:
    """`text` broken at spaces (never inside a word, a number or a hyphenated term) into lines of at most `width`
    characters, the continuation lines indented by `indent`; a line break already in `text` is kept.

    >>> print(wrap_text("does not fit: 27.1 GB over the 84.9 GB of h100-sxm", 30))
    does not fit: 27.1 GB over the
        84.9 GB of h100-sxm
    """
    if not isinstance(text, str):
        raise ConfigurationError(f"text={_short(text)} must be a string to wrap")
    if isinstance(width, bool) or not isinstance(width, numbers.Integral) or not 10 <= int(width) <= 100_000:
        raise ConfigurationError(f"width={_short(width)} must be a whole number of characters from 10 to 100,000")
    if not isinstance(indent, str) or len(indent) >= int(width) // 2:
        raise ConfigurationError(f"indent={_short(indent)} must be a string shorter than half the width ({width})")
    width = int(width)
    return "\n".join(
        textwrap.fill(line, width, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False)
        if len(line) > width
        else line
        for line in text.split("\n")
    )


_DEFINITIONS = """
yocto- = 1e-24 = y-
zepto- = 1e-21 = z-
atto- =  1e-18 = a-
femto- = 1e-15 = f-
pico- =  1e-12 = p-
nano- =  1e-9  = n-
micro- = 1e-6  = µ- = μ- = u-
milli- = 1e-3  = m-
kilo- =  1e3   = k- = K-
mega- =  1e6   = M-
giga- =  1e9   = G-
tera- =  1e12  = T-
peta- =  1e15  = P-
exa- =   1e18  = E-
zetta- = 1e21  = Z-
yotta- = 1e24  = Y-
kibi- = 2**10 = Ki-
mebi- = 2**20 = Mi-
gibi- = 2**30 = Gi-
tebi- = 2**40 = Ti-
pebi- = 2**50 = Pi-
second = [time] = s = sec
minute = 60 * second = min
hour = 60 * minute = h = hr
day = 24 * hour = d
bit = [information] = b
byte = 8 * bit = B = octet
flop = [computation] = FLOP
FLOPS = flop / second
percent = 0.01 = %
"""


def _pint():
    """The pint module, imported on first use (a heavy third-party import)."""
    import pint

    return pint


@functools.cache
def _registry() -> pint.UnitRegistry:
    """distlab's one registry (_DEFINITIONS), built on first use."""
    registry = _pint().UnitRegistry(None)
    for line in _DEFINITIONS.strip().splitlines():
        registry.define(line)
    registry.formatter.default_format = ".4g~P"  # 107.2 GB, not 107.170039808 GB
    return registry


class _Quantity:
    """Q_: the Quantity class of distlab's registry (ureg.Quantity), standing in for it until the registry is built,
    on the first call: Q_(80, 'GB'), Q_('900 GB/s'); isinstance(x, Q_) and Q_'s attributes read ureg.Quantity's."""

    def __call__(self, *args: Any, **kwargs: Any) -> pint.Quantity:
        return _registry().Quantity(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(_registry().Quantity, name)

    def __instancecheck__(self, value: Any) -> bool:
        return _is_quantity(value) and isinstance(value, _registry().Quantity)


Q_ = _Quantity()


def __getattr__(name: str) -> Any:
    if name == "ureg":  # the registry, built on first use
        return _registry()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _is_quantity(value) -> bool:
    """Whether `value` is a pint Quantity (none exists before pint is imported, so this never imports it)."""
    pint = sys.modules.get("pint")
    return pint is not None and isinstance(value, pint.Quantity)


#: Base units in which plain numbers are read and in which hot paths compute.
BYTES = "B"
BYTES_PER_SECOND = "B/s"
SECONDS = "s"
FLOP = "FLOP"
FLOP_PER_SECOND = "FLOP/s"


def _check_finite(value: float, name: str) -> float:
    if not math.isfinite(value):
        raise ConfigurationError(f"{name}={value!r} is not a finite number")
    return value


def _as_float(value, name: str) -> float:
    """float(value), refusing what overflows a float (10**400) with our error instead of OverflowError."""
    try:
        return _check_finite(float(value), name)
    except OverflowError:
        raise ConfigurationError(
            f"{name}={_short(value)} is too large: valid values are finite numbers below 1.8e308"
        ) from None


def _short(value) -> str:
    """repr(value), cut to 40 characters (a 400-digit int stays readable in a message)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


#: The longest quantity string read; a real one ("900 GB/s", "3.05 s") is a few characters.
MAX_QUANTITY_CHARS = 100
# Terms (a number, a unit name, or a number with its unit: "140GB") joined by '*', '/', '·' or spaces:
# "80 GB", "900 GB/s", "0.2727 * 100". Anything else (powers, brackets, names of functions) is refused
# before pint sees it: pint evaluates '**', and "9**9**9 GB" never ends. The shape is checked by a
# one-pass scanner (_quantity_shape_ok), not a regular expression: "1e1" reads as one number or as 1 and
# the unit "e1", and a backtracking regex tried both for every term (2^24 tries for 24 terms).
_OPERATORS = "/*·"
_UNIT_START = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyzµμ%")
_UNIT_PART = _UNIT_START | set("0123456789_")
_DIGITS = set("0123456789")


def _scan_number(text: str, i: int) -> tuple[int, int | None]:
    """(end of the longest number starting at i, where its unsigned exponent starts or None); (i, None) if none.

    A number is [+-]digits[.digits][e[+-]digits].
    """
    n, j = len(text), i
    if j < n and text[j] in "+-":
        j += 1
    start = j
    while j < n and text[j] in _DIGITS:
        j += 1
    whole = j > start
    if j < n and text[j] == ".":
        k = j + 1
        while k < n and text[k] in _DIGITS:
            k += 1
        if not whole and k == j + 1:
            return i, None  # a lone '.'
        j = k
    elif not whole:
        return i, None
    exponent = None
    if j < n and text[j] in "eE":  # an exponent only when digits follow; otherwise 'e...' is a unit
        k = j + 1
        if k < n and text[k] in "+-":
            k += 1
        if k < n and text[k] in _DIGITS:
            exponent = j if k == j + 1 else None
            while k < n and text[k] in _DIGITS:
                k += 1
            j = k
    return j, exponent


def _scan_unit(text: str, j: int) -> int:
    """End of the unit name starting at j (j itself when none starts there)."""
    if j < len(text) and text[j] in _UNIT_START:
        j += 1
        while j < len(text) and text[j] in _UNIT_PART:
            j += 1
    return j


def _scan_term(text: str, i: int) -> int:
    """End of the term starting at i (a number, a unit name, or a number followed by a unit name), or i.

    "1e5" is one number, but "1e5_x" is 1 and the unit "e5_x": an unsigned exponent followed by '_' (a
    character a unit name may hold but not start with) is read again as the start of the unit name.
    """
    j, exponent = _scan_number(text, i)
    if j == i:
        return _scan_unit(text, i)
    if exponent is not None and j < len(text) and text[j] == "_":
        return _scan_unit(text, exponent)
    return _scan_unit(text, j)


def _quantity_shape_ok(text: str) -> bool:
    """True when text is terms joined by an operator (spaces around it allowed) or by spaces alone.

    One pass, each character read a bounded number of times: linear in len(text).

    >>> _quantity_shape_ok("900 GB/s"), _quantity_shape_ok("2**10 GB"), _quantity_shape_ok("1e1 " * 24 + "!")
    (True, False, False)
    """
    n, i = len(text), 0
    while True:
        j = _scan_term(text, i)
        if j == i:
            return False
        i = j
        if i == n:
            return True
        k = i
        while k < n and text[k].isspace():
            k += 1
        if k < n and text[k] in _OPERATORS:
            k += 1
            while k < n and text[k].isspace():
                k += 1
        elif k == i:
            return False  # two terms need a separator
        if k == n:
            return False  # a trailing operator or space
        i = k


#: Examples of a quantity in each unit distlab reads, for our message on text it cannot read (issue 31: a size box
#: was told to write '900 GB/s').
EXAMPLES = {"B": "'4 GB', '80 GiB' or '1.5e9 B'", "B/s": "'900 GB/s' or '400 Gb/s'", "s": "'3.05 s' or '20 ms'"}
DEFAULT_EXAMPLES = "'80 GB', '900 GB/s' or '400 Gb/s'"


def parse_quantity(text: str, name: str = "value", examples: str = DEFAULT_EXAMPLES):
    """Read a string such as "900 GB/s", "3.05 s" or "0.27 * 100" with distlab's registry.

    Returns a pint Quantity, or a plain number for a string without units. Raises UnitError
    for anything else: powers ("2**10 GB"), brackets, calls; its message offers `examples`.

    >>> parse_quantity('900 GB/s')
    <Quantity(900.0, 'gigabyte / second')>
    """
    text = str(text).strip()
    if not text:
        raise UnitError(f"{name} is empty; expected a quantity such as '80 GB'")
    if len(text) > MAX_QUANTITY_CHARS or not _quantity_shape_ok(text):
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise UnitError(
            f"{name}={shown!r} is not a quantity distlab can read: write a number, then its "
            f"unit, such as '80 GB', '900 GB/s', '1.5e9 B' or '3.05 s'"
        )
    try:
        value: pint.Quantity = Q_(text)
    except Exception as exc:  # pint raises several exception types for bad text
        if isinstance(exc, _pint().UndefinedUnitError):  # pint's own words ("... the unit registry") name its internals
            unknown = exc.unit_names if isinstance(exc.unit_names, str) else ", ".join(exc.unit_names)
            detail = f"{unknown!r} is not a unit"
        else:
            detail = str(exc)
        raise UnitError(
            f"{name}={text!r} is not a quantity distlab can read ({detail}); expected something like {examples}"
        ) from None
    magnitude = value.magnitude if _is_quantity(value) else value
    if not isinstance(magnitude, numbers.Real) or not math.isfinite(magnitude):
        raise UnitError(f"{name}={text!r} is not a finite quantity; expected something like '80 GB'")
    return value


def require_finite(what: str, *values) -> None:
    """Refuse a computed result that overflowed (inputs too far out of range) instead of returning inf or NaN."""
    import numpy as np

    def finite(v) -> bool:
        array = np.asarray(v, dtype=float)
        if array.ndim == 0:  # a single number: a Python check (np.all costs ~10 us a call)
            return math.isfinite(float(array))
        return bool(np.isfinite(array).all())

    if not all(finite(v) for v in values):
        raise ConfigurationError(
            f"{what} is not a finite number: the inputs are too far out of range "
            f"(a bandwidth near 0, or sizes near 1e300)"
        )


def to_base(value, unit: str, name: str = "value") -> float:
    """Read `value` as a plain float in `unit`.

    `value` may be a pint Quantity, a string such as "900 GB/s" or "400 Gb/s", or a
    plain number already in `unit`. Raises UnitError on a wrong dimension or an
    unparseable string, ConfigurationError on NaN or infinity.

    >>> to_base('400 Gb/s', 'B/s')  # a lowercase b is a bit
    50000000000.0
    """
    if isinstance(value, bool):
        raise UnitError(f"{name}={value!r} is a boolean, not a quantity in {unit}")
    if not isinstance(unit, str):
        raise UnitError(f"unit={unit!r} must be a unit name such as 'B', 's' or 'B/s'")
    if isinstance(value, numbers.Real):
        return _as_float(value, name)
    if isinstance(value, str):
        value = parse_quantity(value, name, EXAMPLES.get(unit, DEFAULT_EXAMPLES))
        if not _is_quantity(value):  # a bare number in a string
            return _as_float(value, name)
    if _is_quantity(value):
        if not isinstance(value.magnitude, numbers.Real) or isinstance(value.magnitude, bool):
            raise UnitError(f"{name}={_short(value)} must be a single real number with its unit")
        try:
            dimensionless_unit = Q_(1, unit).dimensionless
        except Exception:  # pint raises several exception types for a bad unit name
            raise UnitError(f"unit={unit!r} is not a unit distlab knows (such as 'B', 's', 'B/s')") from None
        if value.dimensionless and not dimensionless_unit:
            return _as_float(value.to("").magnitude, name)
        try:
            magnitude = value.to(unit).magnitude
        except _pint().DimensionalityError:
            raise UnitError(f"{name}={value:.4g~P} has the wrong dimension: expected a quantity in {unit}") from None
        return _as_float(magnitude, name)
    raise UnitError(f"{name}={_short(value)} (type {type(value).__name__}) is not a number, a quantity or a string")


def positive(value, unit: str, name: str) -> float:
    """Like to_base, and the result must be > 0.

    >>> positive('0 GB', 'B', 'capacity')
    Traceback (most recent call last):
        ...
    distlab.errors.ConfigurationError: capacity must be positive, got 0 B
    """
    number = to_base(value, unit, name)
    if number <= 0:
        raise ConfigurationError(f"{name} must be positive, got {format_quantity(number, unit)}")
    return number


def non_negative(value, unit: str, name: str) -> float:
    """Like to_base, and the result must be >= 0.

    >>> non_negative(0, 's', 'latency')
    0.0
    """
    number = to_base(value, unit, name)
    if number < 0:
        raise ConfigurationError(f"{name} must not be negative, got {format_quantity(number, unit)}")
    return number


#: The largest count positive_int accepts unless told a smaller one: counts beyond it do not fit a float
#: (10**400 would raise OverflowError in every formula); each formula bounds its own counts further.
MAX_COUNT = 10**300


def positive_int(value, name: str, high: int | None = None) -> int:
    """A whole number from 1 to `high` (MAX_COUNT if None); a float such as 8.0 is accepted; 2.5, 0, True are not.

    >>> positive_int(8.0, 'tp')
    8
    """
    if high is not None and (isinstance(high, bool) or not isinstance(high, numbers.Integral)):
        raise ConfigurationError(f"high={_short(high)} must be a whole number (the largest {name} accepted)")
    top = MAX_COUNT if high is None else high
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if ok and not isinstance(value, numbers.Integral):
        ok = math.isfinite(value) and value == int(value)
    if not (ok and 1 <= value <= top):
        limit = f", at most {top:,}" if high is not None else (", below 1e300" if ok and value > top else "")
        raise ConfigurationError(f"{name}={_short(value)} must be a positive whole number{limit}")
    return int(value)


def quantity(value: float, unit: str) -> pint.Quantity:
    """Attach a unit to a plain number (the boundary from hot path to public result).

    >>> quantity(80e9, 'B').to('GB')
    <Quantity(80.0, 'gigabyte')>
    """
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        value = _as_float(value, "value")
    else:
        import numpy as np

        array = np.asarray(value) if isinstance(value, (list, tuple, np.ndarray)) else None
        if array is None or array.dtype.kind not in "iuf" or not np.all(np.isfinite(array)):
            raise ConfigurationError(f"value={_short(value)} must be a finite number or an array of them")
        value = array
    return Q_(value, _unit(unit))


def _unit(unit) -> pint.Unit:
    """A unit of distlab's registry, by name ('GB', 'B/s'); our error for anything else."""
    try:
        return _registry().Unit(unit)
    except Exception:  # pint raises several exception types for a bad unit name
        raise UnitError(f"unit={_short(unit)} is not a unit distlab knows (such as 'B', 'GB', 's', 'B/s')") from None


def gigabytes_property(field: str) -> property:
    """A read-only property showing the float attribute `field` (bytes) as a Quantity in GB, for display.

    >>> class Parts:
    ...     weights_bytes = 14e9
    ...     weights = gigabytes_property("weights_bytes")
    >>> Parts().weights
    <Quantity(14.0, 'gigabyte')>
    """
    return property(lambda self: quantity(getattr(self, field) / 1e9, "GB"), doc=f"{field} as a Quantity in GB")


_BYTE_UNITS = ("B", "kB", "MB", "GB", "TB", "PB")
_BINARY_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def format_bytes(n_bytes: float, digits: int = 3) -> str:
    """Decimal bytes with a prefix chosen so the number is below 1000: 112e9 -> '112 GB'.

    >>> format_bytes(80e9)
    '80 GB'
    """
    return _format_prefixed(n_bytes, _BYTE_UNITS, digits)


def format_gibibytes(n_bytes: float, digits: int = 3) -> str:
    """Binary bytes (GiB = 2**30 B) with a binary prefix: 84.94e9 -> '79.1 GiB'. What CUDA and PyTorch print for a
    GPU's memory (Lesson 1 §2: a GPU sold as "80 GB" shows 79.1 GiB to CUDA).

    >>> format_gibibytes(2**30 * 79.11)
    '79.1 GiB'
    """
    return _format_prefixed(n_bytes, _BINARY_BYTE_UNITS, digits, base=1024.0)


def format_rate(value: float, unit: str = "B/s", digits: int = 3) -> str:
    """A rate with a decimal prefix: 4.5e11 B/s -> '450 GB/s'; 9.89e14 FLOP/s -> '989 TFLOP/s'.

    >>> format_rate(450e9)
    '450 GB/s'
    """
    if not isinstance(unit, str):
        raise UnitError(f"unit={_short(unit)} must be a unit name such as 'B/s' or 'FLOP/s'")
    prefixes = ("", "k", "M", "G", "T", "P", "E")
    return _format_prefixed(value, tuple(p + unit for p in prefixes), digits)


def _formatted(value, digits) -> tuple[float, int]:
    """(value as a finite float, digits as a whole number from 1 to 17), for the format_* functions."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ConfigurationError(f"value={_short(value)} must be a number to format")
    if isinstance(digits, bool) or not isinstance(digits, numbers.Integral) or not 1 <= int(digits) <= 17:
        raise ConfigurationError(f"digits={_short(digits)} must be a whole number from 1 to 17")
    return _as_float(value, "value"), int(digits)


def _format_prefixed(value: float, units: tuple, digits: int, base: float = 1000.0) -> str:
    value, digits = _formatted(value, digits)
    magnitude = abs(value)
    index = 0
    while magnitude >= 999.5 and index < len(units) - 1:
        magnitude /= base
        index += 1
    sign = "-" if value < 0 else ""
    return f"{sign}{magnitude:.{digits}g} {units[index]}"


def format_seconds(seconds: float, digits: int = 3) -> str:
    """Seconds with a readable unit: 0.0025 -> '2.5 ms'; 1,000 s and more in whole seconds with thousands separators,
    rounded to `digits` significant digits (1,020 s, never '1.02e+03 s').

    >>> format_seconds(0.00123), format_seconds(1019.6), format_seconds(-86400.0), format_seconds(0.0)
    ('1.23 ms', '1,020 s', '-86,400 s', '0 s')
    """
    (seconds, digits), (scale, unit) = _formatted(seconds, digits), second_unit(seconds)
    return f"{_written_out(seconds / scale + 0.0, digits)} {unit}"  # + 0.0: no "-0 s"


def second_unit(seconds: float) -> tuple[float, str]:
    """(scale, unit) format_seconds writes `seconds` in (s, ms, µs or ns), for a figure beside it in the same unit."""
    seconds = _formatted(seconds, 3)[0]
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if abs(seconds) >= scale * 0.9995 or (seconds == 0 and scale == 1.0):  # nothing is "0 s", not "0 ns"
            return scale, unit
    return 1e-9, "ns"


def _written_out(value: float, digits: int) -> str:
    """`value` to `digits` significant digits, written out with thousands separators where the 'g' format would
    switch to an exponent (1019.6 -> '1,020', not '1.02e+03')."""
    text = f"{value:.{digits}g}"
    return f"{float(text):,.0f}" if "e+" in text else text


def format_count(count: float, digits: int = 3) -> str:
    """A count in words a reader takes in at a glance: 1e12 -> '1 trillion', 4.2e9 -> '4.2 billion', 12,345 ->
    '12,345' (thousands separators below a million), never '1e+12'. Lessons 7 and 12 (tokens of a training run).

    >>> format_count(1e12), format_count(1.5e10), format_count(2.5e6), format_count(12345)
    ('1 trillion', '15 billion', '2.5 million', '12,345')
    """
    count, digits = _formatted(count, digits)
    magnitude = abs(count)
    for scale, word in ((1e12, "trillion"), (1e9, "billion"), (1e6, "million")):
        if magnitude >= scale * (1 - 0.5 * 10.0**-digits):
            return f"{_written_out(count / scale, digits)} {word}"
    return f"{count:,.0f}"


def format_percent(fraction: float) -> str:
    """A fraction as a percentage with one decimal: 0.0987 -> '9.9%'."""
    return f"{100.0 * fraction:.1f}%"


def format_quantity(value: float, unit: str) -> str:
    """Format a plain number in a base unit for messages.

    >>> format_quantity(989.4e12, 'FLOP/s')
    '989 TFLOP/s'
    """
    if not isinstance(unit, str):
        raise UnitError(f"unit={_short(unit)} must be a unit name such as 'B' or 's'")
    if unit == BYTES:
        return format_bytes(value)
    if unit == SECONDS:
        return format_seconds(value)
    if unit in (BYTES_PER_SECOND, FLOP_PER_SECOND):
        return format_rate(value, unit)
    value, _ = _formatted(value, 4)
    if not isinstance(unit, str):
        raise UnitError(f"unit={_short(unit)} must be a unit name such as 'B' or 's'")
    return f"{value:.4g} {unit}"
