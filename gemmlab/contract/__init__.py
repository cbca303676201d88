"""Layer 1, the plugin contract: what a kernel plugin implements and how the core finds it.

``hookspecs`` is the whole contract (data types and hook specifications), ``plugin_utils`` the
plain helpers plugins may use, ``registry`` the discovery of plugins through pluggy. Imports only
the base (``gemmlab.errors``, ``gemmlab.paths``); plugins import only this layer.
"""
