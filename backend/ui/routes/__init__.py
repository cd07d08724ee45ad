"""The dashboard's routers: cluster pages, the job page, actions and submission."""
