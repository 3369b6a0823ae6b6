"""The page served at ``/ui`` (``server/ui.py``): static HTML, CSS and JavaScript modules.

A package only so that the files ship as package data and an installed copy finds them.
"""
