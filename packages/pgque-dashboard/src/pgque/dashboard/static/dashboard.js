// The pgque dashboard's own script (the only other one is htmx).
//
// A destructive action (dropping a group's head, deleting a dead letter) is refused by the
// server unless its form carries confirm=<the exact id of what it destroys>. The form holds
// that id in data-confirm-value; it is added to the request here, when htmx fires
// htmx:configRequest, which comes only after the form's hx-confirm dialog was accepted. A form
// sent without that dialog (htmx not loaded, another page) lacks it and changes nothing.
document.addEventListener("htmx:configRequest", function (event) {
  var elt = event.detail.elt;
  var form = elt && elt.closest ? elt.closest("form[data-confirm-value]") : null;
  if (form !== null) {
    event.detail.parameters["confirm"] = form.getAttribute("data-confirm-value");
  }
});
