"""Services between the REST/dashboard routes and the engine: views, uploads, program runs."""
