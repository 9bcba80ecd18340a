"""Demand forecasting: usage history -> quantile forecasts (p50, p95) for sizing placements.

Pure core: pandas, numpy and xgboost only; no database, web framework or cloud SDK.
Modules: history (validation, regular grid), features, model (global XGBoost),
baselines, evaluate (hold-out scoring), sizing, demand (request/response parts).
Nothing is imported here so that `broker.placements.request_documents` can use `demand` without loading XGBoost.
"""
