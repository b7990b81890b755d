"""The service's assistants: the graphs it offers (catalogue), those clients created (records), and their API (api)."""
