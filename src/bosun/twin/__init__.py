"""The digital twin: replay cluster traces through bosun's scheduling core and measure."""
