"""Views: text tables, the offline HTML viewer, Model Explorer JSON, Perfetto timelines, the module-time icicle."""
