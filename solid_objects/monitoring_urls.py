"""URLs of the monitoring endpoints::

    urlpatterns = [..., path("solid-objects/", include("solid_objects.monitoring_urls"))]

``health/`` is always there; ``metrics/`` only when ``prometheus-client`` is installed
(the ``metrics`` extra).
"""

from __future__ import annotations

from importlib.util import find_spec

from django.urls import URLPattern, path

from .health import health_view

app_name = "solid_objects_monitoring"

urlpatterns: list[URLPattern] = [path("health/", health_view, name="health")]

if find_spec("prometheus_client") is not None:
    from .metrics import metrics_view

    urlpatterns.append(path("metrics/", metrics_view, name="metrics"))
