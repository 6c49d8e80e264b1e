"""What the simulated fleet works with: modules, their tools, and the names planners invent.

Plain data, no randomness: :mod:`guardtrace.simulator.fleet` draws from it with a seeded
``random.Random``. Each tool is ``(name, class, description)``, where class is ``"write"``
or ``"read"`` (it feeds the fabrication guard's tool classes, as an agent would configure
them) or ``""`` for tools that neither write nor read.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "COMMON_INVENTIONS",
    "GENERIC_TOOLS",
    "INVENTED_NOUNS",
    "INVENTED_QUALIFIERS",
    "INVENTED_VERBS",
    "MODULE_TOOLS",
    "Tool",
    "module_names",
    "tools_of",
]

Tool = tuple[str, str, str]

_W, _R, _N = "write", "read", ""

MODULE_TOOLS: Final[dict[str, tuple[Tool, ...]]] = {
    "travel": (
        ("search_flights", _R, "Search flights between two airports on a date."),
        ("book_flight", _W, "Book a flight offer returned by search_flights."),
        ("search_hotels", _R, "Search hotels in a city for a date range."),
        ("book_hotel", _W, "Book a hotel room offer."),
        ("get_weather_forecast", _R, "Daily weather forecast for a city."),
        ("convert_currency", _N, "Convert an amount between two currencies."),
        ("get_visa_requirements", _R, "Entry and visa rules for a passport and country."),
        ("send_itinerary", _W, "E-mail the itinerary to the traveller."),
    ),
    "support": (
        ("lookup_customer", _R, "Find a customer by e-mail, phone or account id."),
        ("get_order_status", _R, "Status and tracking of an order."),
        ("create_ticket", _W, "Open a support ticket."),
        ("update_ticket", _W, "Change status, priority or notes of a ticket."),
        ("search_knowledge_base", _R, "Full-text search over help-centre articles."),
        ("issue_refund", _W, "Refund an order, fully or partially."),
        ("escalate_to_human", _W, "Hand the conversation to a human agent."),
        ("send_reply", _W, "Send a reply to the customer."),
    ),
    "billing": (
        ("get_invoice", _R, "Fetch one invoice with its lines."),
        ("list_invoices", _R, "List invoices of an account in a period."),
        ("create_credit_note", _W, "Issue a credit note against an invoice."),
        ("charge_card", _W, "Charge the card on file."),
        ("get_subscription", _R, "Plan, seats and renewal date of a subscription."),
        ("update_subscription", _W, "Change plan or seats of a subscription."),
        ("calculate_tax", _N, "Compute VAT or sales tax for an address."),
        ("export_ledger", _W, "Export ledger entries to the finance share."),
    ),
    "research": (
        ("search_papers", _R, "Search an index of scientific papers."),
        ("fetch_paper", _R, "Download the full text of a paper."),
        ("summarize_document", _N, "Summarise a long document."),
        ("extract_citations", _N, "List the references cited by a document."),
        ("search_documents", _R, "Search the team's internal documents."),
        ("compare_sources", _N, "Compare claims across several sources."),
        ("write_report", _W, "Write a report to the shared drive."),
        ("translate_text", _N, "Translate text between languages."),
    ),
    "devops": (
        ("get_deployment_status", _R, "Rollout status of a service."),
        ("list_pods", _R, "Pods of a namespace with their state."),
        ("read_logs", _R, "Tail the logs of a pod or service."),
        ("restart_service", _W, "Rolling restart of a service."),
        ("run_pipeline", _W, "Trigger a CI/CD pipeline."),
        ("rollback_release", _W, "Roll a service back to its previous release."),
        ("query_metrics", _R, "Run a PromQL query."),
        ("open_incident", _W, "Open an incident and page the on-call."),
    ),
    "hr": (
        ("lookup_employee", _R, "Find an employee record."),
        ("get_leave_balance", _R, "Remaining leave days of an employee."),
        ("submit_leave_request", _W, "Submit a leave request for approval."),
        ("search_policies", _R, "Search the HR policy handbook."),
        ("schedule_interview", _W, "Book an interview slot with a panel."),
        ("create_offer_letter", _W, "Draft an offer letter from a template."),
        ("list_open_roles", _R, "Open positions by team and location."),
        ("update_profile", _W, "Update fields of an employee profile."),
    ),
    "sales": (
        ("lookup_account", _R, "Find a CRM account."),
        ("list_opportunities", _R, "Open opportunities of an account."),
        ("update_opportunity", _W, "Change stage, amount or close date."),
        ("create_quote", _W, "Create a quote from the price list."),
        ("get_price_list", _R, "Current list prices by region."),
        ("log_call", _W, "Log a call with notes on an account."),
        ("schedule_meeting", _W, "Send a meeting invitation."),
        ("forecast_pipeline", _N, "Quarter forecast from open opportunities."),
    ),
    "legal": (
        ("search_contracts", _R, "Search signed contracts."),
        ("get_clause", _R, "Fetch one clause of a contract."),
        ("compare_contracts", _N, "Diff two contract versions."),
        ("flag_risk", _W, "Flag a clause for legal review."),
        ("draft_nda", _W, "Draft an NDA from the standard template."),
        ("check_compliance", _N, "Check a text against a compliance rule set."),
        ("list_obligations", _R, "Obligations and deadlines of a contract."),
        ("request_signature", _W, "Send a document for e-signature."),
    ),
}

# Modules beyond the named ones (``--modules 12``) use these.
GENERIC_TOOLS: Final[tuple[Tool, ...]] = (
    ("search_documents", _R, "Search the team's internal documents."),
    ("read_file", _R, "Read a file from the workspace."),
    ("write_file", _W, "Write a file to the workspace."),
    ("lookup_record", _R, "Fetch a record by id."),
    ("update_record", _W, "Update fields of a record."),
    ("send_notification", _W, "Notify a user or a channel."),
    ("summarize_document", _N, "Summarise a long document."),
    ("translate_text", _N, "Translate text between languages."),
)

# Names planners invent again and again: plausible, and never in any catalog above.
COMMON_INVENTIONS: Final[tuple[str, ...]] = (
    "web_search", "send_email", "sql_query", "http_request", "python_exec",
    "slack_notify", "calendar_lookup", "jira_create_issue", "google_search",
    "database_query", "get_current_time", "time-tool-v1", "weather-tool-v1",
    "crm_lookup", "browser_open", "file_writer",
)

# The long tail: verb + noun + qualifier, in one of a few naming styles, so no two runs
# of the same seed differ and most names are new (the cardinality cap is what they test).
INVENTED_VERBS: Final[tuple[str, ...]] = (
    "get", "fetch", "lookup", "query", "search", "find", "list", "create", "update",
    "sync", "validate", "check", "resolve", "compute", "estimate", "generate", "send",
    "notify", "book", "cancel", "export", "import", "parse", "enrich", "rank", "match",
    "verify", "schedule", "track", "analyze",
)
INVENTED_NOUNS: Final[tuple[str, ...]] = (
    "flight_prices", "hotel_availability", "customer_profile", "order_history",
    "invoice_pdf", "tax_rates", "exchange_rates", "pod_metrics", "incident_timeline",
    "leave_calendar", "salary_band", "contract_terms", "clause_risk", "lead_score",
    "pipeline_stage", "paper_abstract", "citation_graph", "shipping_label",
    "refund_policy", "support_macro", "vendor_list", "seat_map", "loyalty_points",
    "audit_trail", "feature_flags", "release_notes", "user_sessions", "sla_breaches",
    "gdpr_request", "expense_report", "travel_policy", "room_booking", "meeting_notes",
    "product_catalog", "inventory_level", "fraud_score", "credit_limit", "kyc_status",
    "churn_risk", "nps_feedback",
)
INVENTED_QUALIFIERS: Final[tuple[str, ...]] = (
    "", "v2", "v3", "api", "tool", "agent", "service", "pro", "bulk", "live", "internal",
    "beta",
)


def module_names(count: int) -> list[str]:
    """The first ``count`` module names: the named modules, then ``module-09``, ..."""
    named = list(MODULE_TOOLS)
    return named[:count] + [f"module-{i:02d}" for i in range(len(named) + 1, count + 1)]


def tools_of(module: str) -> tuple[Tool, ...]:
    """The tool catalog of ``module`` (the generic one for numbered modules)."""
    return MODULE_TOOLS.get(module, GENERIC_TOOLS)
