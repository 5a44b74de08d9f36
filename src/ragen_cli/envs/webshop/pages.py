"""Text of WebShop's pages, in the style of WebShop's text observation mode (visible page text
joined by ' [SEP] '), plus the clickable elements of each page (lower-case, as in WebShop's
`get_available_actions`)."""

from __future__ import annotations

PRODUCT_WINDOW = 10  # results per page (engine.py)
SUB_PAGES = ("description", "features", "reviews")


def _header(instruction: str) -> list[str]:
    return ["Instruction:", instruction]


def search_page(instruction: str) -> str:
    return " [SEP] ".join(["WebShop", *_header(instruction), "Search"])


def n_pages(results: list) -> int:
    return max(1, -(-len(results) // PRODUCT_WINDOW))


def results_page(instruction: str, results: list[dict], page: int) -> str:
    parts = [*_header(instruction), "Back to Search", f"Page {page} (Total results: {len(results)})"]
    if page > 1:
        parts.append("< Prev")
    if page < n_pages(results):
        parts.append("Next >")
    for p in results[(page - 1) * PRODUCT_WINDOW: page * PRODUCT_WINDOW]:
        parts += [p["asin"], p["Title"], p["Price"]]
    return " [SEP] ".join(parts)


def results_clickables(results: list[dict], page: int) -> list[str]:
    out = ["back to search"]
    if page > 1:
        out.append("< prev")
    if page < n_pages(results):
        out.append("next >")
    return out + [p["asin"].lower() for p in results[(page - 1) * PRODUCT_WINDOW: page * PRODUCT_WINDOW]]


def item_page(instruction: str, product: dict, chosen: dict[str, str]) -> str:
    parts = [*_header(instruction), "Back to Search", "< Prev"]
    for name, values in product["options"].items():
        parts.append(name)
        parts += [f"{v} (selected)" if chosen.get(name) == v else v for v in values]
    parts += [product["Title"], f"Price: {product['Price']}", f"Rating: {product['Rating']}",
              "Description", "Features", "Reviews", "Buy Now"]
    return " [SEP] ".join(parts)


def item_clickables(product: dict) -> list[str]:
    values = [v for vals in product["options"].values() for v in vals]
    return ["back to search", "< prev", *values, *SUB_PAGES, "buy now"]


def sub_page(instruction: str, product: dict, which: str) -> str:
    parts = [*_header(instruction), "Back to Search", "< Prev"]
    if which == "description":
        parts.append(product["Description"] or "(no description)")
    elif which == "features":
        parts += product["BulletPoints"] or ["(no features)"]
    else:
        parts += [f"{r['score']} stars: {r['body']}" for r in product["Reviews"]] or ["(no reviews)"]
    return " [SEP] ".join(parts)


def done_page(asin: str, chosen: dict[str, str], reward: float) -> str:
    options = ", ".join(f"{k}: {v}" for k, v in chosen.items()) or "none"
    return " [SEP] ".join(["Thank you for shopping with us!", f"Purchased: {asin}", f"Options: {options}",
                           "Your score (min 0.0, max 1.0)", f"{reward:.4g}"])
