"""Units of measure: the aliases faithrag reads after a number, what each measures, and the
conversions between the units of one dimension (faithrag.quantities uses them).

Dimensions: length, mass, area, time (seconds to fortnights), months and years (each on their
own: their length in days varies), speed, percent, temperature (°C / °F / K, converted through
kelvin) and currencies (one dimension per currency: never converted). "degrees" alone is a
dimension of its own. A unit is named by its first alias ("metres" is "m").

Example::

    >>> from faithrag.units import convert, read_unit
    >>> read_unit("kilometres")
    ('km', 'length')
    >>> round(convert(100, "km", "mi", "length"), 2)
    62.14
"""

from __future__ import annotations

# alias -> (dimension, factor to the dimension's base unit); temperatures are handled apart
UNIT_TABLE: dict[str, tuple[str, float]] = {}
SYMBOL: dict[str, str] = {}  # alias -> the unit's first alias: "metres" -> "m"


def _units(dimension: str, factor: float, *aliases: str) -> None:
    for alias in aliases:
        UNIT_TABLE[alias] = (dimension, factor)
        SYMBOL[alias] = aliases[0]


_units("length", 1e-3, "mm", "millimetre", "millimetres", "millimeter", "millimeters")
_units("length", 1e-2, "cm", "centimetre", "centimetres", "centimeter", "centimeters")
_units("length", 1.0, "m", "metre", "metres", "meter", "meters")
_units("length", 1e3, "km", "kms", "kilometre", "kilometres", "kilometer", "kilometers")
_units("length", 0.0254, "inch", "inches")  # not "in": "1887 in London"
_units("length", 0.3048, "ft", "foot", "feet")
_units("length", 0.9144, "yd", "yard", "yards")
_units("length", 1609.344, "mi", "mile", "miles")
_units("length", 1852.0, "nautical mile", "nautical miles", "nmi")
_units("mass", 1e-3, "mg", "milligram", "milligrams", "milligramme", "milligrammes")
_units("mass", 1.0, "g", "gram", "grams", "gramme", "grammes")
_units("mass", 1e3, "kg", "kgs", "kilogram", "kilograms", "kilogramme", "kilogrammes", "kilo",
       "kilos")
_units("mass", 1e6, "tonne", "tonnes", "metric ton", "metric tons")
_units("mass", 453.59237, "lb", "lbs")
_units("mass", 28.349523125, "oz", "ounce", "ounces")
_units("area", 1.0, "m2", "m²", "sq m", "square metre", "square metres", "square meter",
       "square meters")
_units("area", 1e6, "km2", "km²", "sq km", "square kilometre", "square kilometres",
       "square kilometer", "square kilometers")
_units("area", 1e4, "ha", "hectare", "hectares")
_units("area", 4046.8564224, "acre", "acres")
_units("area", 2589988.110336, "sq mi", "square mile", "square miles", "mi2", "mi²")
_units("area", 0.09290304, "sq ft", "square foot", "square feet", "ft2", "ft²")
_units("time", 1.0, "s", "sec", "secs", "second", "seconds")
_units("time", 60.0, "min", "mins", "minute", "minutes")
_units("time", 3600.0, "h", "hr", "hrs", "hour", "hours")
_units("time", 86400.0, "day", "days")
_units("time", 604800.0, "week", "weeks")
_units("time", 1209600.0, "fortnight", "fortnights")
_units("months", 1.0, "month", "months")
_units("years", 1.0, "year", "years", "yr", "yrs")
_units("years", 10.0, "decade", "decades")
_units("speed", 1.0, "m/s")
_units("speed", 1 / 3.6, "km/h", "kmh", "kph", "kilometres per hour", "kilometers per hour")
_units("speed", 0.44704, "mph", "miles per hour")
_units("percent", 1.0, "%", "percent", "per cent", "pct")
_units("currency:usd", 1.0, "dollar", "dollars", "usd")
_units("currency:eur", 1.0, "euro", "euros", "eur")
_units("currency:gbp", 1.0, "gbp", "pounds sterling")
_units("currency:jpy", 1.0, "yen", "jpy")
TEMPERATURES = {  # alias -> scale
    "°c": "C", "° c": "C", "c": "C", "celsius": "C", "degrees celsius": "C",
    "degree celsius": "C",
    "centigrade": "C", "degrees centigrade": "C", "°f": "F", "° f": "F", "f": "F",
    "fahrenheit": "F", "degrees fahrenheit": "F", "degree fahrenheit": "F", "kelvin": "K",
    "kelvins": "K", "degrees kelvin": "K"}
CURRENCY_SIGNS = {"$": "currency:usd", "us$": "currency:usd", "€": "currency:eur",
                   "£": "currency:gbp", "¥": "currency:jpy"}
# bare "c" and "f" are temperatures only right after a degree sign or "degrees"
BARE_LETTER_UNITS = {"c", "f"}

SCALE_WORDS = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12,
                "bn": 1e9, "mn": 1e6, "mln": 1e6}
CURRENCY_SCALES = {"m": 1e6, "k": 1e3, "b": 1e9}




def read_unit(alias: str) -> tuple[str, str]:
    """(unit, dimension) of a unit alias as read after a number ("°c", "degrees", "miles")."""
    alias = " ".join(alias.split())
    if alias in TEMPERATURES:
        return TEMPERATURES[alias], "temperature"
    if alias in ("degree", "degrees"):
        return "degrees", "degrees"
    return SYMBOL[alias], UNIT_TABLE[alias][0]


def convertible(dimension: str | None) -> bool:
    """Whether values of `dimension` convert between its units."""
    return dimension is not None and dimension not in ("degrees", "clock") and \
        not dimension.startswith("currency")


def to_base(value: float, unit: str | None, dimension: str | None) -> float:
    """`value` in the base unit of its dimension (kelvin for temperatures); as it is for a
    dimension that does not convert."""
    if dimension == "temperature":
        return _to_kelvin(value, unit)
    if not convertible(dimension):
        return value
    return value * UNIT_TABLE[unit][1]


def convert(value: float, unit: str, into: str, dimension: str) -> float:
    """`value` from `unit` into `into`, two units of one convertible dimension."""
    if dimension == "temperature":
        return _from_kelvin(_to_kelvin(value, unit), into)
    return value * UNIT_TABLE[unit][1] / UNIT_TABLE[into][1]


def _to_kelvin(value: float, scale: str) -> float:
    return {"C": value + 273.15, "F": (value - 32) * 5 / 9 + 273.15, "K": value}[scale]


def _from_kelvin(kelvin: float, scale: str) -> float:
    return {"C": kelvin - 273.15, "F": (kelvin - 273.15) * 9 / 5 + 32, "K": kelvin}[scale]
