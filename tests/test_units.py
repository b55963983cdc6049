import pytest

from faithrag.units import convert, convertible, read_unit, to_base


@pytest.mark.parametrize("alias, unit, dimension", [
    ("kilometres", "km", "length"), ("metres", "m", "length"), ("°c", "C", "temperature"),
    ("degrees fahrenheit", "F", "temperature"), ("degrees", "degrees", "degrees"),
    ("per cent", "%", "percent"), ("lbs", "lb", "mass"), ("square  miles", "sq mi", "area"),
])
def test_an_alias_reads_as_its_unit_and_dimension(alias, unit, dimension):
    assert read_unit(alias) == (unit, dimension)


def test_conversions_within_a_dimension():
    assert convert(100, "km", "mi", "length") == pytest.approx(62.137, abs=1e-3)
    assert convert(12, "C", "F", "temperature") == pytest.approx(53.6)
    assert convert(1, "kg", "lb", "mass") == pytest.approx(2.20462, abs=1e-5)
    assert to_base(0, "C", "temperature") == pytest.approx(273.15)


@pytest.mark.parametrize("dimension, expected", [
    ("length", True), ("temperature", True), ("currency:usd", False), ("degrees", False),
    (None, False)])
def test_currencies_and_bare_degrees_never_convert(dimension, expected):
    assert convertible(dimension) is expected
