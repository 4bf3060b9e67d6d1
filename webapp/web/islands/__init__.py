"""The React islands' page data: what the server hands the provider chooser and the error
page beside the JSON endpoints, in the request's language (the islands' sources are in
``ui-src/``)."""
