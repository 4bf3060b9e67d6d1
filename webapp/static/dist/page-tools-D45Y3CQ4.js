for(let t of document.querySelectorAll("button[data-copy]"))navigator.clipboard?.writeText&&(t.hidden=!1,t.addEventListener("click",async()=>{let n=document.querySelector(t.dataset.copy),e=document.querySelector(t.dataset.status),o=[...n?.querySelectorAll("code")??[]].map(c=>c.textContent.trim());try{await navigator.clipboard.writeText(o.join(`
`)+`
`),e&&(e.textContent=t.dataset.copied)}catch{e&&(e.textContent=t.dataset.copyFailed)}}));for(let t of document.querySelectorAll("button[data-print]"))typeof window.print=="function"&&(t.hidden=!1,t.addEventListener("click",()=>window.print()));
