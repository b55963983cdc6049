import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from faithrag.quantities import compare, quantities, remainder, vague


def one(text):
    (q,) = quantities(text)
    return q


@pytest.mark.parametrize("text, value, unit", [
    ("8,849 metres", 8849, "m"), ("1.5 million", 1_500_000, None), ("3/4", 0.75, None),
    ("-3", -3, None), ("\u22123.5 \u00b0C", -3.5, "C"), ("twenty-one", 21, None),
    ("one hundred and five", 105, None), ("a dozen", 12, None), ("half a million", 500_000, None),
    ("$5m", 5_000_000, "currency:usd"), ("5m", 5, "m"), ("12%", 12, "%"),
    ("12 per cent", 12, "%"), ("12 degrees Celsius", 12, "C"), ("53.6 \u00b0F", 53.6, "F"),
    ("21st", 21, None), ("third", 3, None), ("100 km", 100, "km"), ("62 miles", 62, "mi"),
    ("3:45 pm", 15 * 60 + 45, "clock"), ("£304m", 304_000_000, "currency:gbp"),
])
def test_numbers_are_read_with_their_value_and_unit(text, value, unit):
    q = one(text)
    assert q.kind == "number" and q.value == pytest.approx(value) and q.unit == unit


@pytest.mark.parametrize("text, year, month, day, span", [
    ("1990-06-05", 1990, 6, 5, None), ("June 5, 1990", 1990, 6, 5, None),
    ("5th of June 1990", 1990, 6, 5, None), ("May 1887", 1887, 5, None, None),
    ("March 18 , 2018", 2018, 3, 18, None), ("June 5,1990", 1990, 6, 5, None),
    ("25/12/1990", 1990, 12, 25, None), ("03/04/1990", 1990, None, None, None),
    ("300 BC", -300, None, None, None), ("1880s", None, None, None, (1880, 1889)),
    ("19th century", None, None, None, (1801, 1900)), ("June", None, 6, None, None),
])
def test_dates_are_read_with_their_precision(text, year, month, day, span):
    q = one(text)
    assert (q.kind, q.year, q.month, q.day, q.span) == ("date", year, month, day, span)


@pytest.mark.parametrize("text, low, high", [
    ("1900 to 1904", 1900, 1904), ("1900-1904", 1900, 1904), ("1900\u201304", 1900, 1904),
    ("between 5 and 10 km", 5, 10), ("5 to 10 million", 5e6, 1e7), ("seasons 1 -- 5", 1, 5),
])
def test_ranges_are_read_with_both_ends(text, low, high):
    q = one(text)
    assert q.kind == "range" and (q.low.value, q.high.value) == (low, high)


def test_a_unit_on_the_second_end_of_a_range_applies_to_both():
    q = one("between 5 and 10 km")
    assert q.low.unit == q.high.unit == "km"


@pytest.mark.parametrize("text", ["3D printing", "B2B sales", "Apollo11", "born in London",
                                  "it may rain", "the one that got away in May of last year"])
def test_names_and_words_that_look_like_quantities_are_not_read(text):
    assert [q for q in quantities(text) if q.kind != "number" or q.value != 1] == []


def test_a_month_name_alone_counts_only_as_the_whole_answer():
    assert one("in May").month == 5 and one("June").month == 6
    assert quantities("it may rain") == ()


def test_a_descending_pair_is_a_score_not_a_range():
    assert [q.value for q in quantities("3-1")] == [3, 1]


@pytest.mark.parametrize("text", ["a few", "several hundred", "dozens of them", "many"])
def test_vague_amounts_have_no_value(text):
    assert vague(text)
    assert all(q.kind != "number" or q.value != 100 for q in quantities(text))


def test_the_remainder_is_the_text_without_its_quantities():
    assert remainder("about 8,849 metres above sea level") == "about above sea level"


@pytest.mark.parametrize("a, b, expected", [
    ("8,849 m", "8849 metres", True), ("1887", "May 1887", True), ("1887", "1921", False),
    ("May 1887", "June 1887", False), ("12 \u00b0C", "53.6 \u00b0F", True),
    ("12 \u00b0C", "54 \u00b0F", True), ("100 km", "62 miles", True),
    ("10 km", "10 miles", False), ("1.5 million", "15 million", False),
    ("3/4", "34", False), ("1880s", "1887", True), ("1880s", "1890", False),
    ("19th century", "1887", True), ("1900 to 1904", "1902", None),
    ("1900 to 1904", "1900", None), ("1900 to 1904", "1910", False),
    ("1900 to 1904", "1900-1904", True), ("5 km", "5 kg", None), ("$5", "\u00a35", None),
    ("June 5", "1990-06-05", True), ("June 5", "June 6", False), ("12%", "12", True),
    ("-40 \u00b0C", "-40 \u00b0F", True), ("300 kelvin", "26.85 \u00b0C", True),
    ("300 K", "26.85 \u00b0C", False),  # a bare K is not read as kelvin: 300 is not 26.85
])
def test_compare(a, b, expected):
    assert compare(one(a), one(b)) is expected
    assert compare(one(b), one(a)) is expected


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_reading_any_text_never_fails(text):
    for q in quantities(text):
        assert 0 <= q.start <= q.end
        assert compare(q, q) in (True, None)


@settings(max_examples=200, deadline=None)
@given(st.integers(-60, 60))
def test_celsius_and_its_fahrenheit_to_one_decimal_are_the_same_temperature(celsius):
    fahrenheit = f"{celsius * 9 / 5 + 32:.1f} \u00b0F"
    assert compare(one(f"{celsius} \u00b0C"), one(fahrenheit)) is True


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 10**6), st.sampled_from([("km", "m", 1000), ("kg", "g", 1000),
                                               ("m", "cm", 100), ("km", "mm", 10**6)]))
def test_metric_units_convert(value, units):
    big, small, factor = units
    assert compare(one(f"{value} {big}"), one(f"{value * factor:,} {small}")) is True
    assert compare(one(f"{value} {big}"), one(f"{value + 1} {big}")) is False
