import streamlit as st

st.title("group_advantage")
st.info("This page is being built.")
