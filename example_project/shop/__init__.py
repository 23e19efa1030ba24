"""The example shop: one visitor cart, a checkout against a fake payment provider, an activity feed.

Where each part lives (modules the apps discover on their own, like ``admin.py``):

- ``shop/actors.py``: the cart actor (``solid_objects`` autodiscovers an ``actors`` module in
  every installed app) and the effect handler of the fake payment provider;
- ``shop/projections.py``: the activity projections (``tilttek_activity`` autodiscovers a
  ``projections`` module), e.g. per-member counters;
- ``shop/views.py``: the pages; ``home`` renders ``shop/home.html`` with ``cart`` and ``feed``;
- ``shop/management/commands/demo_setup.py``: the demo admin user (``make demo`` runs it).
"""
