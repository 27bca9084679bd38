//! The speculation benchmark's workloads, as user messages: (a) edit a given code block with a
//! small change, (b) answer from a given context by quoting it, (c) an agent loop that emits
//! one more tool call in the format of the earlier ones, (d) free-form story writing, which
//! nothing in the context predicts.

/// A workload: its name and its user message.
pub struct Workload {
    pub name: &'static str,
    pub message: String,
}

const CODE: &str = r#"def summarize_orders(orders, tax_rate=0.2):
    """Totals, averages and the largest order of a list of orders."""
    total = 0.0
    count = 0
    largest = None
    by_customer = {}
    for order in orders:
        amount = order["quantity"] * order["unit_price"]
        amount = amount * (1.0 + tax_rate)
        total += amount
        count += 1
        if largest is None or amount > largest["amount"]:
            largest = {"id": order["id"], "amount": amount}
        customer = order["customer"]
        by_customer[customer] = by_customer.get(customer, 0.0) + amount
    average = total / count if count else 0.0
    best_customer = max(by_customer, key=by_customer.get) if by_customer else None
    return {
        "total": round(total, 2),
        "count": count,
        "average": round(average, 2),
        "largest": largest,
        "best_customer": best_customer,
        "by_customer": by_customer,
    }


def format_report(summary):
    lines = []
    lines.append("Orders: %d" % summary["count"])
    lines.append("Total: %.2f" % summary["total"])
    lines.append("Average: %.2f" % summary["average"])
    if summary["largest"] is not None:
        lines.append("Largest: %s (%.2f)" % (summary["largest"]["id"], summary["largest"]["amount"]))
    for customer, amount in sorted(summary["by_customer"].items()):
        lines.append("  %s: %.2f" % (customer, amount))
    return "\n".join(lines)
"#;

const CONTEXT: &str = "The harbour town of Westmere was founded in 1742 by fishermen who \
moved north after the great storm destroyed their villages along the southern coast. The \
first houses were built of driftwood and stone from the cliffs, and the harbour wall, which \
still stands today, was finished in 1751 after nine years of work by the whole town. In the \
nineteenth century Westmere became known for its herring fleet: at its height in 1880 more \
than two hundred boats sailed from the harbour, and the smokehouses along Quay Street employed \
four hundred people, most of them women. The railway reached the town in 1869, which allowed \
fresh fish to be sold in the cities of the interior within a day of being landed. The decline \
of the herring in the 1920s hit the town hard. Half of the fleet was sold within ten years, \
and the population fell from six thousand to just under three thousand by 1935. The town \
council tried to attract visitors instead: the promenade was built in 1931, the old \
customs house became a museum in 1934, and the annual lantern festival, held on the first \
Saturday of October, was started in 1937 to mark the end of the fishing season. During the \
Second World War the harbour served as a base for minesweepers, and the lighthouse on Gull \
Point was used as a lookout station. After the war the town slowly recovered. A small \
boatyard opened in 1952 and built wooden fishing boats until 1987, when it turned to \
repairing yachts. The museum was extended in 1974 with a hall for the history of the \
lifeboat service, whose crews saved more than eight hundred lives between 1824 and 1974. \
Today Westmere has about four thousand inhabitants. Tourism is the largest employer, \
followed by the boatyard, the fish market, which still sells the catch of eleven boats \
every morning except Sunday, and the school. The lantern festival draws around twenty \
thousand visitors each year. The harbour wall, the customs house museum and the lighthouse, \
which was automated in 1991 and can be visited from April to September, are the town's \
best-known sights. The local council meets in the old market hall, built in 1826, whose \
clock tower was restored in 2009 with money raised by the people of the town. The tide \
tables are posted every week on the door of the harbour master's office, a tradition that \
goes back to the founding of the town, and the harbour master still rings the bell on the \
quay when the last boat of the day comes in.";

const TOOL_LOG: &str = r#"You are a weather agent. For each city, emit exactly one tool call line.
Calls so far:
{"tool": "get_weather", "arguments": {"city": "Paris", "country": "FR", "units": "metric", "fields": ["temperature", "wind", "humidity"]}}
{"tool": "get_weather", "arguments": {"city": "Berlin", "country": "DE", "units": "metric", "fields": ["temperature", "wind", "humidity"]}}
{"tool": "get_weather", "arguments": {"city": "Lisbon", "country": "PT", "units": "metric", "fields": ["temperature", "wind", "humidity"]}}
{"tool": "get_weather", "arguments": {"city": "Warsaw", "country": "PL", "units": "metric", "fields": ["temperature", "wind", "humidity"]}}
{"tool": "get_weather", "arguments": {"city": "Athens", "country": "GR", "units": "metric", "fields": ["temperature", "wind", "humidity"]}}
Now emit the calls for Rome, Madrid, Vienna, Prague, Oslo, Dublin, Brussels and Helsinki, one per line, in exactly the same format."#;

/// Every workload.
pub fn all() -> Vec<Workload> {
    vec![
        Workload {
            name: "edit",
            message: format!(
                "Rewrite this Python code with the parameter `tax_rate` renamed to `vat`. \
                 Output the whole code and nothing else.\n\n```python\n{CODE}```"
            ),
        },
        Workload {
            name: "quote",
            message: format!(
                "{CONTEXT}\n\nUsing only the text above, quote the sentences that describe \
                 the history of the town from 1869 to 1937, word for word."
            ),
        },
        Workload {
            name: "agent",
            message: TOOL_LOG.to_string(),
        },
        Workload {
            name: "story",
            message: "Write a long story about a lighthouse keeper who befriends a whale."
                .to_string(),
        },
    ]
}
