"""WebShop-compatible shopping env: catalogue + BM25 search, pages, WebShop reward."""
