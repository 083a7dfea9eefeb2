"""Kera: a deterministic dataflow language, its graph IR and compiler."""
