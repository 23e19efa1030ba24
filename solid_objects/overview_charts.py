"""Small server-rendered SVG bar charts for the admin overview (no script, no CDN)."""

from __future__ import annotations

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from .overview import Series

WIDTH, HEIGHT, GAP = 300, 80, 1


def _figure(value: float, unit: str) -> str:
    if unit == "s":
        return f"{value:.2f} s" if value < 10 else f"{value:.0f} s"
    return f"{value:,.0f}"


def bar_chart(series: Series) -> SafeString:
    """An SVG bar chart of ``series`` (one bar per minute, the newest on the right), with
    its peak written on the axis and each bar's value in its tooltip."""
    count = max(len(series.values), 1)
    peak = series.peak
    step = WIDTH / count
    bars = []
    for index, value in enumerate(series.values):
        minutes_ago = count - 1 - index
        height = 0.0 if not value or not peak else max(1.0, value / peak * (HEIGHT - 14))
        shown = "no data" if value is None else _figure(value, series.unit)
        bars.append(
            (
                f"{index * step:.2f}",
                f"{HEIGHT - height:.2f}",
                f"{max(step - GAP, 1):.2f}",
                f"{height:.2f}",
                f"{minutes_ago} min ago: {shown}",
            )
        )
    rects = format_html_join(
        "",
        '<rect class="so-bar" x="{}" y="{}" width="{}" height="{}"><title>{}</title></rect>',
        bars,
    )
    return format_html(
        '<svg class="so-chart" viewBox="0 0 {} {}" width="100%" role="img" aria-label="{}">'
        '<line class="so-axis" x1="0" y1="{}" x2="{}" y2="{}"></line>{}'
        '<text class="so-peak" x="4" y="12">peak {}</text></svg>',
        WIDTH,
        HEIGHT,
        series.label,
        HEIGHT - 0.5,
        WIDTH,
        HEIGHT - 0.5,
        rects,
        _figure(peak, series.unit),
    )
