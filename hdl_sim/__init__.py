"""RTL library of the Verilog back end (IEEE-754 cores), shipped as package data."""
